-- The Nexmark streams as Millrace tables: the nexmark project's `person`, `auction` and
-- `bid` (ddl_gen.sql's rows and ddl_views.sql's views) declared as the three streams
-- Millrace ingests them as, one JSON object per event (examples/nexmark/events.py).
-- Changes from the project's DDL (the dialect requires them): one table per stream
-- instead of one `datagen` table of three nested ROW types filtered into views, and
-- `WITH ('stream' = ...)` instead of a connector. Ids and prices never NULL (NOT NULL).

CREATE TABLE person (
    id  BIGINT NOT NULL,
    name  VARCHAR,
    emailAddress  VARCHAR,
    creditCard  VARCHAR,
    city  VARCHAR,
    state  VARCHAR,
    `dateTime` TIMESTAMP(3),
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('stream' = 'persons');

CREATE TABLE auction (
    id  BIGINT NOT NULL,
    itemName  VARCHAR,
    description  VARCHAR,
    initialBid  BIGINT,
    reserve  BIGINT,
    `dateTime`  TIMESTAMP(3),
    expires  TIMESTAMP(3),
    seller  BIGINT NOT NULL,
    category  BIGINT,
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('stream' = 'auctions');

CREATE TABLE bid (
    auction  BIGINT NOT NULL,
    bidder  BIGINT NOT NULL,
    price  BIGINT NOT NULL,
    channel  VARCHAR,
    url  VARCHAR,
    `dateTime`  TIMESTAMP(3),
    extra  VARCHAR,
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('stream' = 'bids');
