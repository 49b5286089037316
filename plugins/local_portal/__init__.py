"""A real HTTP portal on loopback that speaks the Socrata Discovery/export API and the CKAN action
API from a data dir, seeded with real public tables; tests script its datasets and faults."""

from plugins.local_portal.server import Fault, PortalHandle, PortalServer, serve_in_background
from plugins.local_portal.store import PortalStore, four_by_four

__all__ = ["Fault", "PortalHandle", "PortalServer", "PortalStore", "four_by_four", "serve_in_background"]
