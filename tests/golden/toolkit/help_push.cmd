push --help
