"""Every ``KOTAE_*`` setting as an env file: the reference the deployment manifests carry.

    python -m kotae.envfile > deploy/k8s/kotae.env

Each setting is one line ``KOTAE_NAME=default`` preceded by its description;
settings without a default value (unset) and secrets are written commented out,
so the file can be used as is (docker compose ``env_file``, a Kubernetes
ConfigMap) and secrets never land in it. A test checks that every setting of
:class:`kotae.settings.Settings` appears in the deployed file.
"""

from __future__ import annotations

from pathlib import Path

from pydantic_core import PydanticUndefined

from kotae.settings import ENV_PREFIX, Settings


def _render(value: object) -> str:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={'/'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value) if not isinstance(value, str) else value


def is_secret(name: str) -> bool:
    annotation = str(Settings.model_fields[name].annotation)
    return "SecretStr" in annotation or name.endswith(("_api_key", "_token"))


def env_lines() -> list[str]:
    """The env file, one setting after another in the order of the settings class."""
    lines = ["# kotae settings: every KOTAE_* variable with its default (python -m kotae.envfile)."]
    for name, field in Settings.model_fields.items():
        var = f"{ENV_PREFIX}{name.upper()}"
        if field.description:
            lines.append(f"# {field.description}")
        default = field.default
        if default is PydanticUndefined and field.default_factory is not None:
            default = field.default_factory()  # type: ignore[call-arg]
        if is_secret(name):
            lines.append(f"# {var}=  (a secret: set it from a Secret, never here)")
        elif default is None or default in ({}, []):
            lines.append(f"# {var}=")
        else:
            lines.append(f"{var}={_render(default)}")
    return lines


def main() -> None:
    print("\n".join(env_lines()))


if __name__ == "__main__":
    main()
