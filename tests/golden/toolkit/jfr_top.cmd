top ../../fixtures/jfr/cpusplit.jfr
