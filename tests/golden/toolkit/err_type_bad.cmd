convert -f pprof --type "cpu nano" base.folded
