"""``loadaware policy check FILE``: validate a policy file and show what it means (``main``)."""
