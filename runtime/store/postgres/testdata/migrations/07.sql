
-- The store's identity (Store.StoreID): a random id, inserted by the first
-- process that asks for it. A resumed agent turn compares it with the one
-- its checkpoint recorded when the turn made its calls: a schema dropped
-- and created again has another, and its empty claims table says nothing
-- about whether a call started.
CREATE TABLE %[1]s.identity (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	id  text NOT NULL
);
