server --help
