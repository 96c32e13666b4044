flamegraph --help
