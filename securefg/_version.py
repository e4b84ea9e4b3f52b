"""The package version: the one place it is written (``pyproject.toml`` reads it from here).

securefg follows semantic versioning for its public API, the names in ``securefg.api.__all__``
(docs/embedding.md, "Version policy"). Before 1.0 a minor release may change that API, and every
such change is listed in CHANGELOG.md under the version that makes it.
"""

__version__ = "0.2.0"
