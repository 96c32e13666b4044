top --help
