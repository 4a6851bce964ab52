"""accuscope: find where a converted or lower-precision network starts to disagree with its original."""

__version__ = "0.1.0"
