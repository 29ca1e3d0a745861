"""Templates of the files the stand-in packages install (``@NAME@`` placeholders)."""
