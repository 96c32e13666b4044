top --type cpu:nanoseconds base.folded
