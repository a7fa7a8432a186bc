"""The contacts application: from an alignment file to predicted residue contacts.

What a computational biologist runs around the Potts models of
:mod:`sklearn_attn.potts`, and what ``python -m sklearn_attn contacts`` is
made of:

- :class:`Alignment` and :func:`read_alignment`: aligned FASTA, A2M and A3M
  files (gzipped or not), read as plmc reads them and encoded once;
- :func:`distances_from_pdb`, :func:`read_distances` and
  :func:`contact_precision`: a known structure's pair distances, from a PDB
  file or a table, and the precision of ranked contacts against them;
- :func:`write_contacts`, :func:`write_ec`, :func:`write_couplings` and
  :func:`read_couplings`: files for other tools (ranked contact tables,
  plmc's coupling scores, the model's parameters), and :func:`write_weights`
  and :func:`read_weights` for sequence weights;
- :func:`add_parser`: the ``contacts`` command's parser, for a program that
  embeds the command.

The application imports the library; the library never imports it.
"""

from ._alignment import Alignment, read_alignment
from ._command import add_parser
from ._formats import (
    read_couplings,
    read_weights,
    write_contacts,
    write_couplings,
    write_ec,
    write_weights,
)
from ._structure import (
    contact_precision,
    distances_from_pdb,
    read_contact_map,  # noqa: F401  (deprecated; not in __all__)
    read_distances,
)

__all__ = [
    "Alignment",
    "add_parser",
    "contact_precision",
    "distances_from_pdb",
    "read_alignment",
    "read_couplings",
    "read_distances",
    "read_weights",
    "write_contacts",
    "write_couplings",
    "write_ec",
    "write_weights",
]
