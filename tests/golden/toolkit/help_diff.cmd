diff --help
