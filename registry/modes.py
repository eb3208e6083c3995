"""The modes a run chooses between for the scorers' fast paths in training (``[run] fast`` of a
profile, ``--fast`` of ``scorebench run``): ``auto`` takes each scorer's fast form where it has
one on the device, ``off`` runs every scorer as shipped. Here, at the bottom layer, so that the
profile's declaration, the scorers' fast paths and the training loop read one tuple."""

FAST_MODES = ("auto", "off")
