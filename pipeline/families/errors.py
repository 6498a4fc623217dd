"""The error of the family readers, and where a user learns to add a family."""

ADDING_A_FAMILY = "docs/architecture.md, section \"Adding a family\""


class ArchitectureError(ValueError):
    """The checkpoint's config or tensors do not fit a supported family; the message says what to do."""
