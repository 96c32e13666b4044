top - < <(head -c 300 ../../fixtures/jfr/cpusplit.jfr; head -c 200000 /dev/zero)
