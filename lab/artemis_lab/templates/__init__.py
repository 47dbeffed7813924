"""Instance file templates for `artemis create` (string.Template syntax), written for the lab broker."""
