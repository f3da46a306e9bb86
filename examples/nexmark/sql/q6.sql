-- Nexmark Query 6: Average selling price by seller, the average of each seller's last
-- 11 winning bids by their times (the nexmark project's q6.sql; its sink
-- writes the stream `out`). One change, required by SQL itself: the project's text
-- filters `rownum` in the SELECT that defines it, which SQL allows only in the query
-- around it (as Flink's Top-N is written): that query is added. SET bounds the
-- regular join's state, as in q4. Each auction's best bid is a Top-N over no window,
-- an updating result, and the OVER aggregate reads it (Flink does not run an OVER of
-- an updating input, FLINK-19059): its rows update the result (`$op`: -D takes a row
-- back, +I writes one).

SET 'table.exec.state.ttl' = '1 d';

CREATE TABLE nexmark_q6 (
  seller VARCHAR,
  avg_price  BIGINT
) WITH (
  'stream' = 'out'
);

INSERT INTO nexmark_q6
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller ORDER BY B.price DESC) AS rownum
        FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
            FROM auction AS A,
                bid AS B
            WHERE A.id = B.auction
                and B.`dateTime` between A.`dateTime` and A.expires)
    )
    WHERE rownum <= 1
) AS Q;
