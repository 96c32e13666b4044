convert -f folded ../../fixtures/jfr/cpusplit.jfr
