package postgres

// Migrations exposes the schema migrations to the tests.
var Migrations = migrations
