"""Anonymization: faces and licence plates blurred in every frame before any later stage sees pixels."""
