


endpoint	/checkout