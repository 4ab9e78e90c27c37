"""The access service's tables and the queries over them."""
