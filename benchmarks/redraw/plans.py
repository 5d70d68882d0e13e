"""The changes made to each control, the same in the kernel and in the browser."""

from __future__ import annotations

import json


TEXT_VALUES = {  # by the control's description
    "PATTERN": ["A B", "A+? C", "A+ C"],
    "DEFINE": ["A AS SUM(A.price) < 40", "A AS A.price > 11", "A AS SUM(A.price) < 30"],
}


def control_kind(control) -> str:
    if getattr(control, "_options_labels", None):
        return "options"
    if isinstance(control.value, bool):
        return "toggle"
    if isinstance(control.value, (int, float)) and hasattr(control, "step"):
        return "slider"
    if isinstance(control.value, str):
        return "text"
    return "other"


def control_plan(view, name: str, changes: int) -> dict:
    """The values to cycle through for control ``name``, with what must be set first. No
    value is tried out here: that would warm the kit's caches for the kernel's redraws and
    not for the browser's."""
    control = view.controls[name]
    kind = control_kind(control)
    widget = type(control).__name__
    plan = {"kind": kind, "widget": widget, "original": control.value, "context": {}}
    values = view.values
    visible = view._visible.get(name) if hasattr(view, "_visible") else None
    if visible is not None and not visible(values):  # hidden: find a choice that shows it
        for other, c in view.controls.items():
            if other == name or control_kind(c) != "options":
                continue
            shown = [v for v in c._options_values if visible({**values, other: v})]
            if shown:
                plan["context"] = {other: shown[0]}
                break
        else:
            return {**plan, "skip": "hidden for every single other choice"}
    if kind == "slider":
        step = control.step
        d = 1 if control.value + 2 * step <= control.max else -1
        moves = [(d, d, -d, -d)[i % 4] for i in range(changes)]
        plan["moves"], value, seq = moves, control.value, []
        for m in moves:
            value = round(value + m * step, 10) if isinstance(step, float) else value + m * step
            seq.append(value)
    elif kind in ("options", "text", "toggle"):
        if kind == "options":
            opts = list(zip(control._options_labels, control._options_values))
            i = [v for _, v in opts].index(control.value)
            cycle = [opts[(i + k) % len(opts)][1] for k in range(1, len(opts) + 1)]  # ends at the current one
        elif kind == "toggle":
            cycle = [not control.value, control.value]
        else:
            key = (getattr(control, "description", "") or name).strip()
            cycle = [v for v in TEXT_VALUES.get(key, [control.value + " "]) if v != control.value] + [control.value]
        seq = [cycle[k % len(cycle)] for k in range(changes)]
        if kind == "options":
            labels = dict((v, lab) for lab, v in zip(control._options_labels, control._options_values))
            plan["labels"] = [labels[v] for v in seq]
            plan["original_label"] = labels[plan["original"]]
    else:
        return {**plan, "skip": f"a {widget} (no way to change it)"}
    plan["values"] = seq
    if plan["context"]:  # what the browser selects first, and back after
        def label(other, v):
            c = view.controls[other]
            return dict(zip(c._options_values, c._options_labels))[v]
        plan["context_labels"] = {other: label(other, v) for other, v in plan["context"].items()}
        plan["context_back"] = {other: label(other, values[other]) for other in plan["context"]}
    return plan


def values_key(values: dict) -> str:
    return json.dumps(sorted(values.items()), default=str)
