top --cum -n 12 --sample-index alloc_sample_bytes ../../fixtures/jfr/cpusplit.jfr
