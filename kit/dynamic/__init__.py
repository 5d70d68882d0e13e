"""Dynamic tables: continuous queries over ``kit.Stream``s and the changelogs they emit."""
