top - < <(head -c 40 ../../fixtures/jfr/cpusplit.jfr)
