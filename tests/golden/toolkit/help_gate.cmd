gate --help
