top --cum -n 6 --sample-index lock_duration ../../fixtures/jfr/cpusplit.jfr
