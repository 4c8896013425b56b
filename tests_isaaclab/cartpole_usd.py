"""A cartpole articulation authored with ``pxr`` (usd-core), so Isaac Lab's cartpole tasks build offline.

Isaac Lab's own ``cartpole.usd`` is fetched from a cloud bucket at run time. This file writes an
equivalent one with the same prim and joint names (``slider_to_cart`` prismatic along x,
``cart_to_pole`` revolute about y), using only UsdPhysics schemas:

    /cartpole            Xform, ArticulationRootAPI, default prim
      rail               rigid body, fixed to the world by ``/cartpole/root_joint``
      cart               rigid body, 1 kg, slides on the rail in [-4, 4] m
      pole               rigid body, 0.1 kg, 1 m long, hinged on the cart
"""

from __future__ import annotations

from pathlib import Path


def _body(stage, path: str, size: tuple[float, float, float], pos: tuple[float, float, float], mass: float):
    from pxr import Gf, UsdGeom, UsdPhysics

    xform = UsdGeom.Xform.Define(stage, path)
    xform.AddTranslateOp().Set(Gf.Vec3d(*pos))
    prim = xform.GetPrim()
    UsdPhysics.RigidBodyAPI.Apply(prim)
    mass_api = UsdPhysics.MassAPI.Apply(prim)
    mass_api.CreateMassAttr(mass)
    sx, sy, sz = size
    mass_api.CreateDiagonalInertiaAttr(
        Gf.Vec3f(mass * (sy * sy + sz * sz) / 12, mass * (sx * sx + sz * sz) / 12, mass * (sx * sx + sy * sy) / 12)
    )
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0.0, 0.0, 0.0))
    cube = UsdGeom.Cube.Define(stage, f"{path}/visual")
    cube.CreateSizeAttr(1.0)
    cube.AddScaleOp().Set(Gf.Vec3f(*size))
    return prim


def write_cartpole_usd(path: str | Path) -> str:
    """Write the cartpole to ``path`` (``.usda``); returns the path as a string."""
    from pxr import Gf, Usd, UsdGeom, UsdPhysics

    path = str(path)
    stage = Usd.Stage.CreateNew(path)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, "/cartpole").GetPrim()
    stage.SetDefaultPrim(root)
    UsdPhysics.ArticulationRootAPI.Apply(root)

    rail = _body(stage, "/cartpole/rail", (8.0, 0.03, 0.03), (0.0, 0.0, 0.0), 1.0)
    cart = _body(stage, "/cartpole/cart", (0.2, 0.25, 0.2), (0.0, 0.0, 0.0), 1.0)
    pole = _body(stage, "/cartpole/pole", (0.04, 0.04, 1.0), (0.0, 0.0, 0.5), 0.1)

    fixed = UsdPhysics.FixedJoint.Define(stage, "/cartpole/root_joint")
    fixed.CreateBody1Rel().SetTargets([rail.GetPath()])

    slider = UsdPhysics.PrismaticJoint.Define(stage, "/cartpole/slider_to_cart")
    slider.CreateBody0Rel().SetTargets([rail.GetPath()])
    slider.CreateBody1Rel().SetTargets([cart.GetPath()])
    slider.CreateAxisAttr("X")
    slider.CreateLowerLimitAttr(-4.0)
    slider.CreateUpperLimitAttr(4.0)
    slider.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    slider.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    UsdPhysics.DriveAPI.Apply(slider.GetPrim(), "linear")

    hinge = UsdPhysics.RevoluteJoint.Define(stage, "/cartpole/cart_to_pole")
    hinge.CreateBody0Rel().SetTargets([cart.GetPath()])
    hinge.CreateBody1Rel().SetTargets([pole.GetPath()])
    hinge.CreateAxisAttr("Y")
    hinge.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, 0.0))
    hinge.CreateLocalPos1Attr(Gf.Vec3f(0.0, 0.0, -0.5))
    UsdPhysics.DriveAPI.Apply(hinge.GetPrim(), "angular")

    stage.GetRootLayer().Save()
    return path


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(write_cartpole_usd(sys.argv[1] if len(sys.argv) > 1 else "cartpole.usda"))
