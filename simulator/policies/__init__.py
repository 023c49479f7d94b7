"""Python policies added through the method registry (each module holds a ``METHODS`` tuple)."""
