"""Elements and groups of O(2) and O(3): the candidate symmetries every study reads out.

Modules: `elements` (`O2Element`, `O3Element`, `as_element`: what an element is, read from its
matrix), `group` (`Group`, `union`, `closure`), `o2` (2D elements by construction and the
subgroups of O(2)), `o3` (3D elements by construction and the finite subgroups of O(3)).
"""
from symfast.groups import o2, o3
from symfast.groups.elements import O2Element, O3Element, as_element
from symfast.groups.group import Group, closure, union
from symfast.groups.o2 import cyclic, dihedral, identity, orthogonal_group, reflection, rotation, rotation_sweep

__all__ = ["o2", "o3", "O2Element", "O3Element", "as_element", "Group", "closure", "union", "cyclic", "dihedral",
           "identity", "orthogonal_group", "reflection", "rotation", "rotation_sweep"]
