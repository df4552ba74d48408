package store

// SharedField is the field of stored documents holding the resource: a
// resource's current row and its newest history row hold the same value
// there, which an engine may keep once (package sqlite's
// Options.SharedField).
const SharedField = "resource"
