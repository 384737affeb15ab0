/* shunt stat: the sockmap path's counters, when a shuntd runs it. */
#ifndef SHUNT_STAT_SOCKMAP_H
#define SHUNT_STAT_SOCKMAP_H

/* A "# sockmap: ..." line; nothing when it is not attached. */
void stat_sockmap_text(void);
/* ,"sockmap":{...} inside a sample's object; nothing when not attached. */
void stat_sockmap_json(void);

#endif
