"""Prompts are data: one template file per role, in a folder per method family, part of the cache identity.

Every role's prompt (a controller, a verifier, VideoLucy's localizer, the captioner's coarse instruction…)
lives in ``config/prompts/<family>/<role>.txt``, written in senri's own words and carrying every numbered
instruction of the papers for that role (``docs/protocol.md`` maps each instruction id to its line). A
method config may set ``prompts_dir`` to a folder of the user's own (for instance the published wording):
a file found there replaces the default file of the same name; the rest keep the defaults, and the
resolved identity records which file came from where.

Templates use ``$name`` / ``${name}`` placeholders (:class:`string.Template`), so JSON examples with braces
need no escaping; a literal dollar sign is ``$$``. Rendering fails loudly on a placeholder the caller did
not supply, naming the file, so a user's folder with a typo never sends a half-filled prompt.

The digest of a family's files (:func:`prompt_identity`) is part of the config slice of every stage that uses
them: editing one prompt file reruns exactly the jobs that read it.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from senri.paths import CONFIG_DIR

PROMPTS_DIR = CONFIG_DIR / "prompts"


class PromptError(ValueError):
    """A prompt file is missing or cannot be rendered; the message names the file and the placeholder."""


@dataclass(frozen=True)
class Prompt:
    """One role's template, with the file it came from (for error messages and the protocol table)."""

    role: str
    text: str
    path: Path
    #: A release's exact string (:mod:`senri.release_prompts`): rendered as is, its leading and trailing
    #: whitespace part of the text; senri's files lose theirs (a file's last newline is not part of a prompt).
    exact: bool = False

    def placeholders(self) -> set[str]:
        names = set()
        for match in string.Template.pattern.finditer(self.text):
            name = match.group("named") or match.group("braced")
            if name:
                names.add(name)
        return names

    def render(self, **values: Any) -> str:
        missing = self.placeholders() - set(values)
        if missing:
            raise PromptError(f"{self.path}: placeholder(s) {', '.join('$' + m for m in sorted(missing))} have no "
                              f"value; this role supplies {', '.join('$' + v for v in sorted(values)) or 'none'}")
        try:
            text = string.Template(self.text).substitute({k: str(v) for k, v in values.items()})
            return text if self.exact else text.strip()
        except ValueError as exc:  # a stray "$" that is not a placeholder
            raise PromptError(f"{self.path}: {exc} (write a literal dollar sign as $$)") from exc


@dataclass(frozen=True)
class PromptSet:
    """The templates of one family, default files overlaid by the user's ``prompts_dir`` where it has them."""

    family: str
    user_dir: Path | None = None
    #: A subfolder of the family whose files replace the defaults of the same name (a wording for one kind of
    #: video: ``general`` for videos that are not first-person, senri.memory.prompt_variant); None: the defaults.
    variant: str | None = None
    #: The exact strings of a release checkout (``prompts_from_release``), by role: they replace senri's
    #: restatement; a file of ``user_dir`` still replaces both.
    release: Any = None
    _cache: dict[str, Prompt] = field(default_factory=dict, compare=False, repr=False)

    def _from_release(self, role: str) -> bool:
        return self.release is not None and role in self.release.texts and not (
            self.user_dir is not None and (self.user_dir / f"{role}.txt").is_file())

    def path(self, role: str) -> Path:
        if self._from_release(role):
            return self.release.checkout / self.release.sources[role]
        if self.user_dir is not None and (self.user_dir / f"{role}.txt").is_file():
            return self.user_dir / f"{role}.txt"
        if self.variant and (PROMPTS_DIR / self.family / self.variant / f"{role}.txt").is_file():
            return PROMPTS_DIR / self.family / self.variant / f"{role}.txt"
        return PROMPTS_DIR / self.family / f"{role}.txt"

    def __getitem__(self, role: str) -> Prompt:
        if role not in self._cache and self._from_release(role):
            self._cache[role] = Prompt(role, self.release.texts[role], self.path(role), exact=True)
        if role not in self._cache:
            path = self.path(role)
            if not path.is_file():
                where = f" or in prompts_dir {self.user_dir}" if self.user_dir else ""
                raise PromptError(f"prompt file {path} is missing (role {role!r} of family {self.family!r}; "
                                  f"looked in {PROMPTS_DIR / self.family}{where})")
            self._cache[role] = Prompt(role, path.read_text(encoding="utf-8"), path)
        return self._cache[role]

    def render(self, role: str, **values: Any) -> str:
        return self[role].render(**values)

    def roles(self) -> list[str]:
        names = {p.stem for p in (PROMPTS_DIR / self.family).glob("*.txt")}
        if self.user_dir is not None and self.user_dir.is_dir():
            names |= {p.stem for p in self.user_dir.glob("*.txt")}
        return sorted(names)

    def identity(self) -> dict[str, Any]:
        """Family, user folder and the sha256 of every role's file: what decides the prompts' text. The files
        of every variant subfolder are in it too, whichever variant a run uses (the variant follows from other
        settings of the same slice), so editing one reruns the jobs that may read it."""
        files = {role: hashlib.sha256(self[role].text.encode("utf-8") if self._from_release(role)
                                      else self.path(role).read_bytes()).hexdigest()[:16] for role in self.roles()}
        for path in sorted((PROMPTS_DIR / self.family).glob("*/*.txt")):
            files[f"{path.parent.name}/{path.stem}"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        identity = {"family": self.family, "prompts_dir": str(self.user_dir) if self.user_dir else None,
                    "files": files}
        if self.release is not None:
            identity["release"] = {**self.release.identity(),
                                   "from_release": sorted(r for r in self.roles() if self._from_release(r))}
        return identity


def prompt_set(family: str, prompts_dir: str | Path | None = None, variant: str | None = None,
               from_release: str | Path | None = None) -> PromptSet:
    """The prompts of ``family`` (a folder under ``config/prompts``), its ``variant`` subfolder's files in place
    of the defaults of the same name, the exact strings of the release checkout ``from_release`` over those
    (:mod:`senri.release_prompts`), overlaid by ``prompts_dir`` if given."""
    if not (PROMPTS_DIR / family).is_dir():
        raise PromptError(f"no prompt family {family!r}: {PROMPTS_DIR / family} does not exist")
    user = None
    if prompts_dir:
        user = Path(prompts_dir).expanduser()
        if not user.is_absolute():
            user = (CONFIG_DIR.parent / user).resolve()
        if not user.is_dir():
            raise PromptError(f"prompts_dir {prompts_dir!r}: {user} is not a folder")
    release = None
    if from_release:
        from senri.release_prompts import ReleasePromptError, load_release_texts

        try:
            release = load_release_texts(family, from_release)
        except ReleasePromptError as exc:
            raise PromptError(str(exc)) from exc
    return PromptSet(family, user, variant, release)


def config_prompts(spec: Mapping[str, Any], variant: str | None = None) -> PromptSet | None:
    """The prompt set a config slice names with ``prompts: <family>`` (and optional ``prompts_dir`` and
    ``prompts_from_release``)."""
    family = spec.get("prompts")
    return prompt_set(str(family), spec.get("prompts_dir"), variant, spec.get("prompts_from_release")) \
        if family else None


def prompt_identity(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The identity of the prompts a config slice names, or None when it names none."""
    prompts = config_prompts(spec)
    return prompts.identity() if prompts is not None else None
