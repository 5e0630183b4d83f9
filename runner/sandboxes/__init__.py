"""Sandbox backends: one module each, all implementing ``sandboxes.base``."""
