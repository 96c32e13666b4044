top - < <(head -c 60000 ../../fixtures/jfr/cpusplit.jfr)
