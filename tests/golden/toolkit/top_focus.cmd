top --focus "^alloc$" base.folded
