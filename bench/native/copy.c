/*
 * ferry-native-copy: the bench's `native` system, the broker ceiling's copy loop (bench/ceiling.py)
 * with no Python in it: librdkafka alone.
 *
 *   ferry-native-copy --partitions N [--block I/K] [-c KEY=VALUE]... [-p KEY=VALUE]... TOPIC...
 *
 * One consumer (assign() from the beginning of the I-th of K contiguous blocks of the N partitions of
 * every TOPIC, no group membership, no commits) and one producer; each record is produced to the same
 * topic and partition of the destination with its key, value, headers and timestamp. -c and -p are the
 * consumer's and the producer's librdkafka settings, bootstrap.servers included: the bench passes the
 * same ones the ceiling's clients get (Ferry's client defaults plus its overrides), so the two differ
 * only in the language of the loop. Runs until SIGTERM or SIGINT, then flushes and exits: 0 when every
 * record was delivered, 1 (the count and the first error on stderr) when some were not, 2 on bad usage
 * or a client that could not be made.
 *
 * Which librdkafka: the one the confluent-kafka wheel ships (confluent_kafka.libs/librdkafka-*.so.1),
 * linked by its path with an rpath to its folder, so `native` runs the very library the Python
 * systems run and the comparison is of the loops alone. The wheel ships no headers: this file is
 * compiled against Debian's librdkafka-dev (2.0.2). librdkafka keeps its ABI across 2.x and every
 * call here exists in 2.0.2, so an older header against the newer library is safe (the reverse
 * would not be). scripts/build-native-copy.sh builds it (`make setup`); Ferry itself never needs it.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

/* Records asked of each consume call, and how long it may wait for them: as the ceiling's consume(). */
#define BATCH 10000
#define CONSUME_TIMEOUT_MS 10
/* How long a full local queue waits for deliveries before the record is offered again. */
#define QUEUE_FULL_POLL_MS 50
#define FLUSH_TIMEOUT_MS 30000

static volatile sig_atomic_t stopping = 0;

static void on_signal(int signum) {
    (void)signum;
    stopping = 1;
}

/* Delivery failures: counted, the first kept for the exit message. librdkafka calls this from
 * rd_kafka_poll() and rd_kafka_flush() on this thread, so no lock is needed. */
static long failures = 0;
static char first_failure[512] = "";

static void on_delivery(rd_kafka_t *producer, const rd_kafka_message_t *message, void *opaque) {
    (void)producer;
    (void)opaque;
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (failures++ == 0)
        snprintf(first_failure, sizeof first_failure, "%s", rd_kafka_err2str(message->err));
}

static void usage(void) {
    fprintf(stderr,
            "usage: ferry-native-copy --partitions N [--block I/K] [-c KEY=VALUE]... [-p KEY=VALUE]... TOPIC...\n");
}

/* Sets "KEY=VALUE" on conf; exits with a message when librdkafka rejects it. */
static void set(rd_kafka_conf_t *conf, const char *role, const char *setting) {
    char key[256], error[512];
    const char *equals = strchr(setting, '=');
    if (equals == NULL || (size_t)(equals - setting) >= sizeof key) {
        fprintf(stderr, "%s setting %s is not KEY=VALUE\n", role, setting);
        exit(2);
    }
    memcpy(key, setting, (size_t)(equals - setting));
    key[equals - setting] = '\0';
    if (rd_kafka_conf_set(conf, key, equals + 1, error, sizeof error) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "%s setting %s: %s\n", role, key, error);
        exit(2);
    }
}

/* Produces one consumed record to the same topic and partition. A full local queue is served
 * (deliveries polled) and the record offered again, as the ceiling does on BufferError. */
static void copy_record(rd_kafka_t *producer, rd_kafka_message_t *message) {
    rd_kafka_timestamp_type_t timestamp_type;
    int64_t timestamp = rd_kafka_message_timestamp(message, &timestamp_type);
    rd_kafka_headers_t *headers = NULL;
    /* The headers move to the new record (the producer owns them once produced): no copy. */
    if (rd_kafka_message_detach_headers(message, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR)
        headers = NULL;
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            producer, RD_KAFKA_V_TOPIC(rd_kafka_topic_name(message->rkt)), RD_KAFKA_V_PARTITION(message->partition),
            /* The consumer's buffer is freed right after: the producer keeps a copy, as confluent-kafka's does. */
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE(message->payload, message->len),
            RD_KAFKA_V_KEY(message->key, message->key_len),
            RD_KAFKA_V_TIMESTAMP(timestamp_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? 0 : timestamp),
            RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return;
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(producer, QUEUE_FULL_POLL_MS);
            continue;
        }
        /* Not produced: the headers are still ours, and the record counts as a failed delivery. */
        if (headers != NULL)
            rd_kafka_headers_destroy(headers);
        if (failures++ == 0)
            snprintf(first_failure, sizeof first_failure, "%s", rd_kafka_err2str(err));
        return;
    }
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        {"partitions", required_argument, NULL, 'n'},
        {"block", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    char error[512];
    long partitions = 0, index = 0, count = 1;
    rd_kafka_conf_t *consumer_conf = rd_kafka_conf_new();
    rd_kafka_conf_t *producer_conf = rd_kafka_conf_new();
    /* A consumer needs a group.id to be made; assign() joins no group and nothing is committed. */
    set(consumer_conf, "consumer", "group.id=ferry-bench-native");
    int option;
    while ((option = getopt_long(argc, argv, "c:p:", options, NULL)) != -1) {
        switch (option) {
        case 'n':
            partitions = strtol(optarg, NULL, 10);
            break;
        case 'b':
            if (sscanf(optarg, "%ld/%ld", &index, &count) != 2) {
                usage();
                return 2;
            }
            break;
        case 'c':
            set(consumer_conf, "consumer", optarg);
            break;
        case 'p':
            set(producer_conf, "producer", optarg);
            break;
        default:
            usage();
            return 2;
        }
    }
    if (partitions < 1 || count < 1 || index < 0 || index >= count || optind >= argc) {
        usage();
        return 2;
    }

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    rd_kafka_conf_set_dr_msg_cb(producer_conf, on_delivery);
    rd_kafka_t *producer = rd_kafka_new(RD_KAFKA_PRODUCER, producer_conf, error, sizeof error);
    if (producer == NULL) {
        fprintf(stderr, "producer: %s\n", error);
        return 2;
    }
    rd_kafka_t *consumer = rd_kafka_new(RD_KAFKA_CONSUMER, consumer_conf, error, sizeof error);
    if (consumer == NULL) {
        fprintf(stderr, "consumer: %s\n", error);
        return 2;
    }
    /* Records come from the consumer's queue (consume_batch_queue below), as confluent-kafka's consume(). */
    rd_kafka_poll_set_consumer(consumer);

    /* The I-th of K contiguous blocks of partitions, the same split as the ceiling's --block. */
    rd_kafka_topic_partition_list_t *assignment = rd_kafka_topic_partition_list_new((int)((argc - optind) * partitions));
    for (int t = optind; t < argc; t++)
        for (long p = 0; p < partitions; p++)
            if (p * count / partitions == index)
                rd_kafka_topic_partition_list_add(assignment, argv[t], (int32_t)p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t err = rd_kafka_assign(consumer, assignment);
    rd_kafka_topic_partition_list_destroy(assignment);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "assign: %s\n", rd_kafka_err2str(err));
        return 2;
    }

    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(consumer);
    rd_kafka_message_t **messages = malloc(sizeof *messages * BATCH);
    if (messages == NULL) {
        perror("malloc");
        return 2;
    }
    while (!stopping) {
        ssize_t received = rd_kafka_consume_batch_queue(queue, CONSUME_TIMEOUT_MS, messages, BATCH);
        for (ssize_t i = 0; i < received; i++) {
            /* Errors (a partition's end, a fetch error) are skipped, as the ceiling skips them. */
            if (messages[i]->err == RD_KAFKA_RESP_ERR_NO_ERROR)
                copy_record(producer, messages[i]);
            rd_kafka_message_destroy(messages[i]);
        }
        rd_kafka_poll(producer, 0);
    }
    free(messages);
    rd_kafka_queue_destroy(queue);

    rd_kafka_resp_err_t flushed = rd_kafka_flush(producer, FLUSH_TIMEOUT_MS);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    int undelivered = rd_kafka_outq_len(producer);
    rd_kafka_destroy(producer);
    if (flushed != RD_KAFKA_RESP_ERR_NO_ERROR)
        fprintf(stderr, "flush: %s, %d records or requests not delivered\n", rd_kafka_err2str(flushed), undelivered);
    if (failures > 0) {
        fprintf(stderr, "%ld records failed delivery, the first: %s\n", failures, first_failure);
        return 1;
    }
    return flushed == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : 1;
}
