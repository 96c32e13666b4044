collapse --help
