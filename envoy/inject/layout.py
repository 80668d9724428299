"""Envoy configs read and written back the way the user wrote them: YAML keeps its comments,
quotes and list indentation, JSON stays JSON, and every line a change does not touch
stays byte for byte (keep_layout).
"""

from __future__ import annotations

import dataclasses
import difflib
import io
import json
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from .model import InjectError

@dataclasses.dataclass
class Document:
    """A parsed config and how to write it back the way it came."""
    data: Any
    fmt: str                          # "yaml" or "json"
    yaml: YAML | None = None
    text: str = ""                    # as the user wrote it
    indent: int = 2                   # JSON
    pristine: str = ""                # the parser's own rendering of the unchanged config

    def serialize(self) -> str:
        if self.fmt == "json":
            return json.dumps(self.data, indent=self.indent, ensure_ascii=False) + "\n"
        out = io.StringIO()
        self.yaml.dump(self.data, out)
        return out.getvalue()

    def dump(self) -> str:
        """The changed config, with every line the change did not touch exactly as the user wrote it."""
        return keep_layout(self.text, self.pristine, self.serialize())


def keep_layout(original: str, pristine: str, changed: str) -> str:
    """Apply the change between two renderings of the config to the user's own text.

    The YAML and JSON writers normalise what they do not understand as
    layout ({ a: 1 } becomes {a: 1}, a JSON object written on one line is
    spread over several). The change is computed between the writer's
    rendering of the config before and after, and applied to the original:
    every stretch of the original the change does not touch stays byte for
    byte as it was.
    """
    before = original.splitlines(keepends=True)
    pristine_lines = pristine.splitlines(keepends=True)
    changed_lines = changed.splitlines(keepends=True)
    # Stretches of the writer's rendering and the original lines they stand for.
    regions: list[list[int]] = []        # [i1, i2, j1, j2]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
            None, pristine_lines, before, autojunk=False).get_opcodes():
        if tag == "equal":
            regions.extend([i, i + 1, j, j + 1] for i, j in zip(range(i1, i2), range(j1, j2)))
        elif regions and i1 == i2:       # original lines with no rendered counterpart join the stretch before
            regions[-1][3] = j2
        else:
            regions.append([i1, i2, j1, j2])
    region_of = {i: region for region in regions for i in range(region[0], region[1])}
    opcodes = difflib.SequenceMatcher(None, pristine_lines, changed_lines, autojunk=False).get_opcodes()
    unchanged = {i for tag, i1, i2, _, _ in opcodes if tag == "equal" for i in range(i1, i2)}
    for tag, i1, i2, _, _ in opcodes:
        if tag == "insert" and i1 in region_of and region_of[i1][0] < i1:
            unchanged.discard(i1)     # new lines inside a stretch: it cannot stay as written
    out: list[str] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "equal":
            out.extend(changed_lines[j1:j2])
            continue
        for i in range(i1, i2):
            region = region_of.get(i)
            if region and all(k in unchanged for k in range(region[0], region[1])):
                if i == region[0]:
                    out.extend(before[region[2]:region[3]])
            else:
                out.append(pristine_lines[i])
    if regions and regions[0][0] == 0 and regions[0][2] > 0:   # original lines before anything rendered
        out[:0] = before[:regions[0][2]]
    return "".join(out)


def _yaml(sequence_indent: int, offset: int) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 20                 # never fold a long line (plugin configs are one JSON line)
    y.indent(mapping=2, sequence=sequence_indent, offset=offset)
    return y


def parse(text: str, name: str = "<config>") -> Document:
    """JSON stays JSON; YAML keeps comments, quotes and the list indentation it was written with."""
    candidates: list[Document] = []
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InjectError(f"{name}: not valid JSON: {exc}") from None
        candidates = [Document(json.loads(text), "json", text=text, indent=indent) for indent in (2, 4)]
    else:
        for seq, off in ((2, 0), (4, 2)):   # `- item` under its key, or indented by two
            y = _yaml(seq, off)
            try:
                data = y.load(text)
            except YAMLError as exc:
                raise InjectError(f"{name}: not valid YAML: {exc}") from None
            candidates.append(Document(data, "yaml", y, text))
    if not isinstance(data, dict):
        raise InjectError(f"{name}: expected an Envoy v3 bootstrap (a mapping), got {type(data).__name__}")
    best, best_same = candidates[0], -1
    for doc in candidates:
        doc.pristine = doc.serialize()
        same = sum(block.size for block in difflib.SequenceMatcher(
            None, text.splitlines(), doc.pristine.splitlines(), autojunk=False).get_matching_blocks())
        if same > best_same:
            best, best_same = doc, same
    return best

