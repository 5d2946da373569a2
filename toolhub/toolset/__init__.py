"""From configuration to an immutable tool set: config models, validation, the builder, the
merge pipeline and definition formats."""

from .builder import PLUGIN_GROUP, ToolSetBuilder
from .catalog import Catalog
from .config import (
    ConfigSource,
    HubConfig,
    McpServerConfig,
    ToolConfig,
    ToolSetConfig,
    default_client_name,
)
from .external import ExternalHandler, ExternalSpec, ExternalTool
from .formats import FORMATS, STRICT_FORMATS, Definition, render_definitions
from .merge import Merged, merge
from .toolset import Entry, Prepared, ToolSet
from .validate import Report

__all__ = [
    "FORMATS",
    "PLUGIN_GROUP",
    "STRICT_FORMATS",
    "Catalog",
    "ConfigSource",
    "Definition",
    "Entry",
    "ExternalHandler",
    "ExternalSpec",
    "ExternalTool",
    "HubConfig",
    "McpServerConfig",
    "Merged",
    "Prepared",
    "Report",
    "ToolConfig",
    "ToolSet",
    "ToolSetBuilder",
    "ToolSetConfig",
    "default_client_name",
    "merge",
    "render_definitions",
]
