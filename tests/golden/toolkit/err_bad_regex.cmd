top --focus "(" base.folded
