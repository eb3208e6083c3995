"""Backbones, one readable file each: the ICL GPT-2, the decoder and encoder language models;
the decoder's checkpoint files."""
