package egress

// FindURLs exports findURLs to the tests.
var FindURLs = findURLs
