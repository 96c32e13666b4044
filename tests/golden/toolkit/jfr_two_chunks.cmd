top --cum -n 8 - < <(cat ../../fixtures/jfr/cpusplit.jfr ../../fixtures/jfr/cpusplit.jfr)
