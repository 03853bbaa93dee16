"""CPU schedules: DLight's CPU rules and dycl's two rules (register-tiled reductions,
parallel + vectorized loop nests)."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: parallelize a loop nest only when it does at least this many inner iterations
PARALLEL_MIN_WORK = 1 << 15
_X86_VECTOR_BITS = {"x86-64": 128, "x86-64-v2": 128, "x86-64-v3": 256, "x86-64-v4": 512}


def schedule_rules(schedule: str) -> list[Any]:
    from tvm.s_tir import dlight

    if schedule == "dlight":
        return [dlight.cpu.GEMV(), dlight.cpu.Reduction()]
    rules = _rule_classes()
    return [rules.TiledReduction(), dlight.cpu.Reduction(), rules.ParallelLoops()]


def apply_schedules(mod, target, schedule: str):
    from tvm.s_tir import dlight

    with target:
        return dlight.ApplyDefaultSchedule(*schedule_rules(schedule))(mod)


@functools.cache
def _rule_classes():
    """The rule classes (defined on first use: they subclass TVM's, and TVM loads lazily)."""
    from types import SimpleNamespace

    from tvm import tirx
    from tvm.s_tir.dlight import ScheduleRule

    class TiledReduction(ScheduleRule):
        """One reduction (matmul, convolution, pooling) with injective blocks
        around it: the output is computed in MR x NR tiles held in registers
        (accumulate over the whole reduction, then write back through the fused
        epilogue), NR along the output's contiguous last axis (vectorized), the
        tile loops fused and run in parallel."""

        def apply(self, func, target, tunable):
            if not isinstance(func, tirx.PrimFunc):
                return None
            try:
                return _tiled_reduction(func, target)
            except Exception:  # any shape this rule does not handle: the next rule's turn
                return None

    class ParallelLoops(ScheduleRule):
        """Anything else: inline what inlines, then each remaining loop nest gets
        parallel outer loops and a vectorized inner loop."""

        def apply(self, func, target, tunable):
            if not isinstance(func, tirx.PrimFunc):
                return None
            try:
                return _parallel_loops(func, target)
            except Exception:  # leave the function unscheduled (serial, still correct)
                return None

    return SimpleNamespace(TiledReduction=TiledReduction, ParallelLoops=ParallelLoops)


# -- ParallelLoops ---------------------------------------------------------------------------------

def _parallel_loops(func, target):
    from tvm import s_tir
    from tvm.s_tir.dlight import try_inline_contiguous_spatial
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    sch = s_tir.Schedule(func)
    infos = normalize_prim_func(sch)
    if infos is None:
        return None
    for info in try_inline_contiguous_spatial(sch, infos):
        _parallel_nest(sch, info, target)
    return sch


def _parallel_nest(sch, info, target) -> None:
    """Fuse the leading spatial loops of a root block (as ``normalize_prim_func``
    left it: one loop per block iterator); run them in parallel when there is
    enough work; vectorize an innermost spatial loop of static extent."""
    block = info.block_rv
    loops = sch.get_loops(block)
    kinds = info.dom_kind()
    if not loops or len(loops) != len(kinds):
        return
    spatial = len(kinds) - len(kinds.lstrip("S"))
    if spatial == 0:
        return
    sizes = [_extent(sch, loop) for loop in loops]
    work = math.prod(size if size is not None else 1 << 10 for size in sizes)
    writes = sch.get(block).writes
    dtype = writes[0].source.dtype if writes else None
    # LLVM codegen cannot store a vector of bools (an int8 vector into a bool buffer)
    touches_bool = any(str(region.source.dtype) == "bool" for region in [*writes, *sch.get(block).reads])
    vector = None
    if (spatial == len(loops) and sizes[-1] is not None and dtype is not None and len(loops) >= 1
            and not touches_bool):
        lanes = _lanes_for(target, _tvm_dtype(dtype))
        width = _divisor(sizes[-1], [lanes * 2, lanes, 4, 2])
        if width > 1 and sizes[-1] >= width:
            outer, vector = sch.split(loops[-1], [None, width])
            loops = [*loops[:-1], outer]
    fused = sch.fuse(*loops[:spatial]) if spatial > 1 else loops[0]
    if work >= PARALLEL_MIN_WORK:
        sch.parallel(fused)
    if vector is not None:
        with contextlib.suppress(Exception):  # e.g. an opaque access below: leave it scalar
            sch.vectorize(vector)


# -- TiledReduction --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Reduction:
    """The one reduction block of a kernel that TiledReduction tiles: its position
    among the kernel's blocks, its loops (``spatial`` of them first, then the
    reduction loops, all of static extent ``sizes``) and its statement."""

    index: int
    block: Any
    spatial: int
    loops: list[Any]
    sizes: list[int]
    stmt: Any


@dataclass(frozen=True)
class _Tiles:
    """The register tile (``mr`` rows x ``nr`` columns) and the operand read whose
    column panels are packed (``packed``, an index into the reads), if any."""

    mr: int
    nr: int
    packed: int | None


def _tiled_reduction(func, target):
    from tvm import s_tir
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    sch = s_tir.Schedule(func)
    infos = normalize_prim_func(sch)
    if not infos:
        return None
    found = _single_reduction(sch, infos)
    if found is None:
        return None
    tiles = _tiles(found, target)
    outer, inner = _split_tiles(sch, found, tiles)
    reduction_loops = found.loops[found.spatial:]
    sch.reorder(*outer, *reduction_loops, *inner)
    panel = sch.cache_read(found.block, tiles.packed, "global") if tiles.packed is not None else None
    accumulate = sch.cache_write(found.block, 0, "local")
    for consumer in infos[found.index + 1:]:  # the epilogue
        try:
            sch.reverse_compute_inline(consumer.block_rv)
        except Exception:  # not elementwise in the output: it runs as its own loop nest
            _parallel_nest(sch, consumer, target)
    if tiles.packed is None:
        tile = parallel = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    else:
        parallel = sch.fuse(*outer[:-2]) if len(outer) > 3 else outer[0]
        tile = outer[-1]
        sch.compute_at(panel, parallel, preserve_unit_loops=True)
    sch.reverse_compute_at(accumulate, tile, preserve_unit_loops=True)
    _vectorize_and_parallelize(sch, found, tiles, parallel, [accumulate, panel])
    for producer in infos[:found.index]:  # the prologue
        _parallel_nest(sch, producer, target)
    return sch


def _single_reduction(sch, infos) -> _Reduction | None:
    """The kernel's only reduction block, if its spatial loops come first, all its
    loops have static extents, it writes one buffer and its innermost spatial
    iterator indexes that buffer's last (contiguous) axis."""
    reductions = [i for i, info in enumerate(infos) if not info.is_injective()]
    if len(reductions) != 1:
        return None
    index = reductions[0]
    block = infos[index].block_rv
    kinds = infos[index].dom_kind()
    spatial = len(kinds) - len(kinds.lstrip("S"))
    if spatial == 0 or kinds[spatial:].strip("R") or len(kinds) == spatial:
        return None
    loops = sch.get_loops(block)
    sizes = [_extent(sch, loop) for loop in loops]
    if any(size is None for size in sizes):
        return None
    stmt = sch.get(block)
    if len(stmt.writes) != 1:
        return None
    if not _uses(stmt.writes[0].region[-1].min, stmt.iter_vars[spatial - 1].var):
        return None
    return _Reduction(index, block, spatial, loops, sizes, stmt)


def _tiles(found: _Reduction, target) -> _Tiles:
    spatial, sizes = found.spatial, found.sizes
    lanes = _lanes_for(target, _tvm_dtype(found.stmt.writes[0].source.dtype))
    nr = _divisor(sizes[spatial - 1], [lanes * 2, lanes, 4, 2])
    mr = _divisor(sizes[spatial - 2], [4, 3, 2]) if spatial >= 2 else 1
    # Matmul-like (an operand indexed by the tile's columns but not its rows):
    # copy that operand's column panel (all of the reduction x NR) into a
    # contiguous buffer once per column tile, reused by every row tile.
    packed = _panel_operand(found.stmt, spatial) if spatial >= 2 and sizes[spatial - 2] > mr else None
    return _Tiles(mr, nr, packed)


def _split_tiles(sch, found: _Reduction, tiles: _Tiles) -> tuple[list[Any], list[Any]]:
    """Split the spatial loops into the loops over tiles (``outer``) and the loops
    inside one tile (``inner``); with a packed panel, the column tiles are grouped
    into panels, the outermost of the tile loops."""
    spatial, sizes = found.spatial, found.sizes
    s_loops = found.loops[:spatial]
    j_outer, j_inner = sch.split(s_loops[-1], [None, tiles.nr])
    if spatial < 2:
        return [j_outer], [j_inner]
    i_outer, i_inner = sch.split(s_loops[-2], [None, tiles.mr])
    if tiles.packed is None:
        return [*s_loops[:-2], i_outer, j_outer], [i_inner, j_inner]
    # panels of up to ~256 KiB; the row tile's operand rows stay in L1 across a panel's column tiles
    depth = math.prod(sizes[spatial:])
    fitting = [t for t in (16, 8, 4, 2) if t * tiles.nr * depth * 4 <= 1 << 18]
    j_panel, j_tile = sch.split(j_outer, [None, _divisor(sizes[spatial - 1] // tiles.nr, fitting)])
    return [*s_loops[:-2], j_panel, i_outer, j_tile], [i_inner, j_inner]


def _vectorize_and_parallelize(sch, found: _Reduction, tiles: _Tiles, parallel, copies: list[Any]) -> None:
    """Vectorize and parallelize while the update still has its init (a reduction
    block); decompose the init out last."""
    if tiles.nr > 1:
        sch.vectorize(sch.get_loops(found.block)[-1])
        for copy in copies:
            if copy is not None:
                with contextlib.suppress(Exception):  # an epilogue that does not vectorize
                    sch.vectorize(sch.get_loops(copy)[-1])
    if tiles.mr > 1:
        sch.unroll(sch.get_loops(found.block)[-2])
    if math.prod(found.sizes) >= PARALLEL_MIN_WORK:
        sch.parallel(parallel)
    init = sch.decompose_reduction(found.block, found.loops[found.spatial])
    if tiles.nr > 1:
        sch.vectorize(sch.get_loops(init)[-1])


# -- shared ----------------------------------------------------------------------------------------

def _extent(sch, loop) -> int | None:
    from tvm import tirx

    value = sch.get(loop).extent
    return int(value.value) if isinstance(value, tirx.IntImm) else None


def _lanes_for(target, dtype) -> int:
    from tvm.target.codegen import llvm_get_vector_width

    # llvm_get_vector_width reports the host's width (512 here) whatever mcpu says
    width = _X86_VECTOR_BITS.get(str(target.attrs.get("mcpu", ""))) or llvm_get_vector_width(target)
    return max((width if width > 0 else 128) // max(dtype.bits, 8), 1)


def _divisor(n: int, candidates: Sequence[int]) -> int:
    return next((c for c in candidates if c <= n and n % c == 0), 1)


def _tvm_dtype(dtype):
    import tvm

    return tvm.runtime.DataType(str(dtype))


def _panel_operand(stmt, spatial: int) -> int | None:
    """The read (index into ``stmt.reads``) that a row tile shares with every other
    row tile: indexed by the innermost spatial iterator and a reduction iterator,
    not by the next-to-innermost spatial one (matmul's right operand)."""
    rows, columns = stmt.iter_vars[spatial - 2].var, stmt.iter_vars[spatial - 1].var
    reduction = [iv.var for iv in stmt.iter_vars[spatial:]]
    for index, region in enumerate(stmt.reads):
        indices = [r.min for r in region.region]
        if (any(_uses(i, columns) for i in indices) and not any(_uses(i, rows) for i in indices)
                and any(_uses(i, r) for i in indices for r in reduction)):
            return index
    return None


def _uses(expr, var) -> bool:
    from tvm.tirx.analysis import undefined_vars

    return any(free.same_as(var) for free in undefined_vars(expr))

