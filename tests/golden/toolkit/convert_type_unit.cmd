convert -f pprof --type cpu:nanoseconds base.folded | "$STROBE" top -
