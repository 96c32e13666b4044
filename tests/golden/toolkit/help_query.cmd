query --help
